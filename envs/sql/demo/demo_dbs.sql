-- StateFlow demo databases for the InterCode SQL environment (written for this project).
-- Three small databases: library, weather, bakery. Loaded data-only by envs.sql.dump.

CREATE DATABASE IF NOT EXISTS `library` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
USE `library`;

CREATE TABLE `author` (
  `author_id` int NOT NULL,
  `name` varchar(80) NOT NULL,
  `country` varchar(40) DEFAULT NULL,
  `born` int DEFAULT NULL,
  PRIMARY KEY (`author_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `author` VALUES
  (1,'Ada Lindqvist','Sweden',1948),
  (2,'Bruno Okafor','Nigeria',1961),
  (3,'Chiara Bellini','Italy',1975),
  (4,'Dmitri Volkov','Russia',1939),
  (5,'Elena Marquez','Spain',1982),
  (6,'Farid Haddad',NULL,1990);

CREATE TABLE `book` (
  `book_id` int NOT NULL,
  `title` varchar(120) NOT NULL,
  `author_id` int NOT NULL,
  `year` int NOT NULL,
  `pages` int DEFAULT NULL,
  `genre` varchar(30) NOT NULL,
  PRIMARY KEY (`book_id`),
  KEY `book_author` (`author_id`),
  CONSTRAINT `book_author` FOREIGN KEY (`author_id`) REFERENCES `author` (`author_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `book` VALUES
  (10,'Northern Lights Over Uppsala',1,1979,312,'novel'),
  (11,'The Quiet Harbour',1,1988,254,'novel'),
  (12,'Lagos After Rain',2,1995,198,'poetry'),
  (13,'Market Day; A Memoir',2,2003,401,'memoir'),
  (14,'Venetian Glass',3,2001,288,'novel'),
  (15,'A Short History of Maps',3,2010,176,'history'),
  (16,'Winter Chess',4,1972,350,'novel'),
  (17,'Letters from Perm',4,1980,NULL,'history'),
  (18,'Salt and Saffron',5,2015,220,'cookbook'),
  (19,'Small Gardens',5,2019,140,'poetry');

CREATE TABLE `member` (
  `member_id` int NOT NULL,
  `name` varchar(80) NOT NULL,
  `joined` date NOT NULL,
  PRIMARY KEY (`member_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `member` VALUES
  (100,'Grace Kim','2019-03-14'),
  (101,'Hugo Martin','2020-11-02'),
  (102,'Iris Novak','2021-06-30'),
  (103,'Jonas Berg','2022-01-09');

CREATE TABLE `loan` (
  `loan_id` int NOT NULL,
  `book_id` int NOT NULL,
  `member_id` int NOT NULL,
  `loaned` date NOT NULL,
  `returned` date DEFAULT NULL,
  PRIMARY KEY (`loan_id`),
  KEY `loan_book` (`book_id`),
  KEY `loan_member` (`member_id`),
  CONSTRAINT `loan_book` FOREIGN KEY (`book_id`) REFERENCES `book` (`book_id`),
  CONSTRAINT `loan_member` FOREIGN KEY (`member_id`) REFERENCES `member` (`member_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `loan` VALUES
  (1,10,100,'2023-01-05','2023-01-20'),
  (2,14,100,'2023-02-01','2023-02-15'),
  (3,10,101,'2023-02-10',NULL),
  (4,16,102,'2023-03-03','2023-03-30'),
  (5,18,102,'2023-04-12','2023-04-20'),
  (6,14,103,'2023-05-01',NULL),
  (7,12,100,'2023-05-09','2023-05-25'),
  (8,10,103,'2023-06-15','2023-07-01');

CREATE DATABASE IF NOT EXISTS `weather` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
USE `weather`;

CREATE TABLE `station` (
  `station_id` int NOT NULL,
  `name` varchar(60) NOT NULL,
  `region` varchar(30) NOT NULL,
  `elevation_m` int NOT NULL,
  PRIMARY KEY (`station_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `station` VALUES
  (1,'Harbor Point','coast',4),
  (2,'Pine Ridge','mountain',1420),
  (3,'Old Mill','valley',230),
  (4,'Summit Hut','mountain',2210);

CREATE TABLE `reading` (
  `station_id` int NOT NULL,
  `day` date NOT NULL,
  `temp_c` decimal(4,1) NOT NULL,
  `rain_mm` decimal(5,1) NOT NULL,
  PRIMARY KEY (`station_id`,`day`),
  CONSTRAINT `reading_station` FOREIGN KEY (`station_id`) REFERENCES `station` (`station_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `reading` VALUES
  (1,'2024-07-01',21.5,0.0),(1,'2024-07-02',22.0,3.2),(1,'2024-07-03',19.8,12.5),
  (2,'2024-07-01',12.1,0.0),(2,'2024-07-02',10.4,8.0),(2,'2024-07-03',9.9,15.1),
  (3,'2024-07-01',24.3,0.0),(3,'2024-07-02',25.1,0.0),(3,'2024-07-03',23.7,1.4),
  (4,'2024-07-01',4.2,2.0),(4,'2024-07-02',-1.5,20.3),(4,'2024-07-03',0.3,5.5);

CREATE DATABASE IF NOT EXISTS `bakery` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
USE `bakery`;

CREATE TABLE `product` (
  `product_id` int NOT NULL,
  `name` varchar(50) NOT NULL,
  `category` varchar(20) NOT NULL,
  `price` decimal(6,2) NOT NULL,
  PRIMARY KEY (`product_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `product` VALUES
  (1,'Sourdough Loaf','bread',5.50),
  (2,'Rye Bread','bread',4.75),
  (3,'Croissant','pastry',2.20),
  (4,'Cinnamon Roll','pastry',3.10),
  (5,'Lemon Tart','cake',4.00),
  (6,'Carrot Cake','cake',3.80);

CREATE TABLE `sale` (
  `sale_id` int NOT NULL,
  `product_id` int NOT NULL,
  `quantity` int NOT NULL,
  `sold_on` date NOT NULL,
  PRIMARY KEY (`sale_id`),
  KEY `sale_product` (`product_id`),
  CONSTRAINT `sale_product` FOREIGN KEY (`product_id`) REFERENCES `product` (`product_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO `sale` VALUES
  (1,1,3,'2024-05-01'),(2,3,12,'2024-05-01'),(3,4,6,'2024-05-01'),
  (4,1,2,'2024-05-02'),(5,2,4,'2024-05-02'),(6,3,9,'2024-05-02'),
  (7,5,1,'2024-05-02'),(8,3,15,'2024-05-03'),(9,6,2,'2024-05-03'),
  (10,1,5,'2024-05-03');

; At most three repairs in a row: never four Error states one after the other.
(define three-repairs
  (:states Init Observe Solve Verify Error End)
  (:behavior
    (not (next (eventually (next Error Error Error Error)) (always (or Init Observe Solve Verify Error End))))))

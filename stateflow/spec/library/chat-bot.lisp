; Chat bot: the bot and the user take turns; the conversation may end after any exchange.
(define chat-bot
  (:states
    (Chat-Bot "Bot:")
    (User "User:" :env-input))
  (:behavior (always (next Chat-Bot User))))

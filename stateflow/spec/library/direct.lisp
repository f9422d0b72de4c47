; Direct prompting: answer the question straight away.
(define direct
  (:states
    (Question "Question:" :env-input)
    Answer)
  (:behavior (next Question Answer)))

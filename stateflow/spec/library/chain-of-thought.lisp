; Chain-of-thought: reason once, then answer.
(define chain-of-thought
  (:states
    (Question "Question:" :env-input)
    Thought
    Answer)
  (:behavior (next Question Thought Answer)))

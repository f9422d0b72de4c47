; ReWOO: plan every tool call up front (one to five plan blocks, each naming its evidence
; label, tool and input), then the environment runs all calls together and a solver writes
; the answer, so the Answer state is env-input.
(define rewoo
  (:states
    (Question "Question:" :env-input)
    (Plan "Plan:")
    (Action-Label "Label:")
    (Action "Action:")
    (Action-Input "Action Input:")
    (Answer "Answer:" :env-input))
  (:behavior
    (next Question
          Plan Action-Label Action Action-Input
          (until_4 (next Plan Action-Label Action Action-Input) Answer))))

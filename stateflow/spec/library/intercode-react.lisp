; ReAct for InterCode-style environments: think, write one action (e.g. execute[...] or
; submit), read the observation. The episode ends when the environment says so (run it with
; spec_to_flow(..., ending="environment")).
(define intercode-react
  (:states
    (Question "Question:" :env-input)
    (Thought "Thought:")
    (Action "Action:")
    (Observation "Observation:" :env-input))
  (:behavior (next Question (always (next Thought Action Observation)))))

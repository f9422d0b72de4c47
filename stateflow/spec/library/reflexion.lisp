; Reflexion: a trial is a short ReAct loop (at most 3 tool steps) ending in a proposed answer
; that the environment evaluates. After an evaluation the agent either answers or writes a
; reflection and tries again (at most 2 retries).
(define reflexion
  (:states
    (Question "Question:" :env-input)
    (Thought "Thought:")
    (Action "Action:")
    (Action-Input "Action Input:")
    (Observation "Observation:" :env-input)
    (Final-Thought "Final Thought:")
    (Proposed-Answer "Proposed Answer:")
    (Evaluation "Evaluation:" :env-input)
    (Reflection "Reflection:")
    (Answer "Answer:"))
  (:behavior
    (next Question
          (until_3 (next Thought Action Action-Input Observation) Final-Thought)
          Proposed-Answer Evaluation
          (until_2
            (next Reflection
                  (until_3 (next Thought Action Action-Input Observation) Final-Thought)
                  Proposed-Answer Evaluation)
            Answer))))

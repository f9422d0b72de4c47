; ReAct: reason, act, observe the tool's result; repeat until ready, then answer.
; The question and every observation come from the environment (env-input).
(define react
  (:states
    (Question (:text "Question:") (:flags :env-input))
    (Thought (:text "Thought:"))
    (Action (:text "Action:"))
    (Action-Input (:text "Action Input:"))
    (Observation (:text "Observation:") (:flags :env-input))
    (Final-Thought (:text "Final Thought:"))
    (Answer (:text "Answer:")))
  (:behavior
    (next Question
          (until (next Thought Action Action-Input Observation) Final-Thought)
          Answer)))

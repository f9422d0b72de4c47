; PASS (Plan-Act-Summarize-Solve): up to 5 rounds of a plan, one or more tool calls that the
; environment runs concurrently, and a summary of their results (env-input); then a final
; thought and the answer. Bracketed texts: "[Action]" and "[Action Input]" share the
; correction prefix "[Action".
(define pass
  (:states
    (Question (:text "[Question]") (:flags :env-input))
    (Plan (:text "[Plan]"))
    (Action (:text "[Action]"))
    (Action-Input (:text "[Action Input]"))
    (Summary (:text "[Summary]") (:flags :env-input))
    (Final-Thought (:text "[Final Thought]"))
    (Answer (:text "[Answer]")))
  (:behavior
    (next Question
          (until_5
            (next Plan Action Action-Input (until (next Action Action-Input) Summary))
            (next Final-Thought Answer)))))

; The SQL tutorial's flow (docs/tutorials/sql-flow.md) submits only what the model answered:
; Submit comes right after Answer, and the set-up runs once, first.
(define answer-before-submit
  (:states Setup Answer Submit End)
  (:behavior (next Setup (or End (next Answer (or End (next Submit End)))))))

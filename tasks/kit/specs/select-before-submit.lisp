; Never submit before a SELECT ran: the run reaches End only after it entered Verify, which the
; InterCode flows enter only after a statement ran (SQL: a successful SELECT).
(define select-before-submit
  (:states Init Observe Solve Verify Error End)
  (:behavior
    (next (until (or Init Observe Solve Error) Verify)
          (until (or Init Observe Solve Verify Error) End))))

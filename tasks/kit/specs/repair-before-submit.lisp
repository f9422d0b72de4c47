; After an error the next state repairs: a failed action is never followed directly by End
; (no submit, no give-up, straight out of Error).
(define repair-before-submit
  (:states Init Observe Solve Verify Error End)
  (:behavior
    (not (next (eventually (next Error End)) (always (or Init Observe Solve Verify Error End))))))

; A check follows an action: Verify is entered only from a state that acted (Solve, Verify or
; Error), never straight from the set-up (Init, Observe).
(define check-after-action
  (:states Init Observe Solve Verify Error End)
  (:behavior
    (not (next (eventually (next (or Init Observe) Verify)) (always (or Init Observe Solve Verify Error End))))))

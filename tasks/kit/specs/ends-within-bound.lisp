; Every run ends in End within the transition bound (check with --cut-off complete: a run the
; bound stops is then a violation).
(define ends-within-bound
  (:states Init Observe Solve Verify Error End)
  (:behavior (until (or Init Observe Solve Verify Error) End)))

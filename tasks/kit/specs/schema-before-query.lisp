; Look at the schema before writing a query: no Solve or Verify before Observe (a run may still
; end, or fail into Error, before it observed anything).
(define schema-before-query
  (:states Init Observe Solve Verify Error End)
  (:behavior
    (or (next (until (or Init Error) Observe) (always (or Init Observe Solve Verify Error End)))
        (until (or Init Error) End))))

; The set-up runs once: Init exactly once, first; Observe at most once, right after Init.
(define setup-once
  (:states Init Observe Solve Verify Error End)
  (:behavior
    (next Init (or (next Observe (always (or Solve Verify Error End)))
                   (always (or Solve Verify Error End))))))

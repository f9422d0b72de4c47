; A person approves before any write: Published is entered only straight after Approve, the
; state where a person answers (examples/approval_over_two_processes.py).
(define approve-before-publish
  (:states Draft Approve Published)
  (:behavior (until (or Draft Approve) (next Approve Published))))

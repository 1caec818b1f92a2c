"""The diagnose stage: records and a rule base in, a finished Diagnosis out.

match (which rule each record is evidence for, incidents root first, consequences folded) -> lines
(the log lines kept near the evidence) -> context (origin, device, libraries, the failing line's
tensors) -> guides (each rule's guide and commands filled with the incident's facts) -> signature.
`pipeline` composes them once; the renderers above only present what it made.
"""

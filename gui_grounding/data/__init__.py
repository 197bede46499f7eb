"""Training data: converters of public grounding datasets, validation, detector-IoU cleaning."""

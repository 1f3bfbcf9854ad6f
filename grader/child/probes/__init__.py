"""One probe module per exercise: the phases that exercise a student's layer."""

"""The packed judge kernel for transformers models: its plan, the forms that execute it, their attention."""

"""The model zoo: tiny random-weight models built locally, and the real models the project knows by name."""

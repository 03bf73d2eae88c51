"""Model hosting: engines behind one small protocol, the packed judge kernel, Ray actors."""

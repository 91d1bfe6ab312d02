"""The CUDA backend: what it states to the generic stages (``backend``), its recipe keys and the .cu entry's
parameters (``recipe``), and nvcc's compile of each variant (``compiler``)."""

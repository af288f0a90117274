"""The lab's machinery: stage trees, teaching kernels, guests, tests and grading.

Nothing in this package knows about a particular chapter; stages are data
under stages/, kernel-patches/, exercises/ and solutions/.
"""

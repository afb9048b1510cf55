"""Means and standard errors, computed one way for every table.

The standard error of a mean over runs (seeds) is the sample standard deviation (n - 1) over sqrt(n);
with fewer than two runs there is none, and the tables say so rather than print 0 or nan. A single
run's accuracy on n examples has the binomial sampling error sqrt(p (1 - p) / n), a different quantity
with its own name here.
"""

import math
import statistics


def mean_and_error(values):
    """(mean, standard error of the mean) of `values`; the error is None with fewer than 2 values."""
    values = list(values)
    if not values:
        raise ValueError("mean_and_error: no values")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, statistics.stdev(values) / math.sqrt(len(values))


def format_mean(values, digits=4, scale=1.0):
    """ "mean ± error" of `values` times `scale`, or "mean (1 run, no standard error)"."""
    mean, error = mean_and_error(values)
    if error is None:
        return f"{mean * scale:.{digits}f} (1 run, no standard error)"
    return f"{mean * scale:.{digits}f} ± {error * scale:.{digits}f}"


def sampling_error(accuracy, count):
    """The binomial standard error of an accuracy measured on `count` examples."""
    return math.sqrt(accuracy * (1 - accuracy) / count)


def error_text(error, digits=4, scale=1.0):
    """A standard error for a table cell: the number, or "none (1 run)" where mean_and_error gave None."""
    return "none (1 run)" if error is None else f"{error * scale:.{digits}f}"

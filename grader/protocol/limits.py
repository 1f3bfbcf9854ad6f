"""One limit per quantity, read by every stage that handles it.

A submission's evidence passes through several stages: the probe that builds the layer and sends
the evidence (``grader.probe``), the parent that reads it and answers with the secret inputs
(``grader.sandbox.evidence``, ``grader.protocol.job``), the child that decodes those secrets, the
judge that reads the evidence the parent forwards (``grader.judging``) and recomputes it
(``grader.judge``). Each quantity they bound has one constant here, in one unit, and each stage
reads it: the earliest stage that can see a quantity refuses it at once, naming the limit, and no
later stage refuses what an earlier one accepted. A stage that holds more than one quantity (a
record holds arrays, the judge's request holds the evidence and the secrets) derives its bound from
these constants, never from a number of its own.

Each comment says what a correct grading uses (the solutions of every exercise, measured), so the
distance between the two is plain.
"""

from __future__ import annotations

import math

# --------------------------------------------------------------------------- the layer's variables
MAX_VARIABLES = 2000  # variables of one layer (its sublayers' included); a correct one has at most 26
MAX_VARIABLE_VALUES = 1_000_000  # values in all the variables of one layer; a correct one has at most 4,145

# --------------------------------------------------------------------------- arrays
# elements of one array: a variable, an array the evidence carries, one the judge makes; a correct
# grading's largest holds 3,072 (exercise 5's embedded batch), its largest variable 640
MAX_ARRAY_ELEMENTS = 500_000
MAX_RANK = 8  # axes of one array; a correct grading's arrays have at most 4
WIDEST_ELEMENT = 8  # bytes of one element on the wire: float64 and int64 (the widest dtype sent)

# --------------------------------------------------------------------------- the form of a record
MAX_DEPTH = 24  # nesting of lists and objects in one record; a correct grading's deepest: 11
MAX_ITEMS = 200_000  # items of one list or object; a correct grading's longest: 26
MAX_KEY = 1_000  # characters of one field name; a correct grading's longest: 20
MAX_RECORD_VALUES = 250_000  # JSON values in one record, counted on its bytes; a correct grading's: 1,200
MAX_EVIDENCE_VALUES = 1_000_000  # JSON values in all the evidence; a correct grading sends at most 6,000
MAX_FRAMES = 8  # lines of the student's file in one error's traceback (the innermost are kept)
MAX_NAMES = 50  # names a submission's file defines, as its load record lists them

# --------------------------------------------------------------------------- text
MAX_TEXT = 4000  # characters of one string a grading process sends (cut, not refused); correct: at most 88
MAX_MESSAGE = 50_000  # characters of one check's message, its cut marker included; correct: a few hundred
MAX_OUTPUT_BYTES = 32 * 1024  # bytes kept of a grading process's stdout, and of its stderr
# bytes JSON may write for one character of text: "\\u0001", or two "\\ud83d"-like escapes for a
# character outside the Basic Multilingual Plane
JSON_CHARACTER_BYTES = 12

# --------------------------------------------------------------------------- a layer call's operations
MAX_OPS = 400  # operations recorded of one call of a layer of the student's own; a correct one: a handful
MAX_CONSTANT = 4  # elements of a tensor made outside the recorded operations that travel as its value
MAX_OP_ITEMS = 64  # items of an operation's list argument, tensors of its result; a correct one: 3 (a split)

# --------------------------------------------------------------------------- the checks
MAX_CHECKS = 40  # checks of one exercise; the largest exercise declares 19


# --------------------------------------------------------------------------- bytes, derived
def encoded_bytes(elements: int, itemsize: int = WIDEST_ELEMENT) -> int:
    """Bytes of the base64 text of ``elements`` values of ``itemsize`` bytes."""
    return 4 * math.ceil(elements * itemsize / 3)


# what a record holds besides the arrays sized by the layer's variables (descriptions, traces, the
# JSON around each array); a correct grading's longest record is 208 KB in all
RECORD_ROOM = 1024 * 1024
# the room every other record of a run takes beside the largest; a correct grading sends 443 KB in all
EVIDENCE_ROOM = 8 * 1024 * 1024
# what the probe keeps of the evidence's bytes and values for the records after one it refuses for
# passing them (each phase's start and its end with the refusal: a few hundred bytes, some twenty values)
EVIDENCE_RESERVE = 256 * 1024
EVIDENCE_RESERVE_VALUES = 10_000
# what naming a notebook's cell ("code cell 3, line 4") adds to one frame or error forwarded to a judge
CELL_NAME_BYTES = 64
# the judge's request beside the evidence and the secrets: the public job (sizes, the files the grading
# process reads) and how the grading process ended, its stdout and stderr as JSON text
REQUEST_ROOM = 1024 * 1024 + 2 * MAX_OUTPUT_BYTES * JSON_CHARACTER_BYTES

# bytes of one record, either way: the gradients phase sends every trainable variable's gradient and its
# value after a few steps, in float64 at the widest
MAX_RECORD_BYTES = 2 * encoded_bytes(MAX_VARIABLE_VALUES) + RECORD_ROOM
# bytes of all the evidence, as it arrives and as the parent forwards it to the judge
MAX_EVIDENCE_BYTES = MAX_RECORD_BYTES + EVIDENCE_ROOM
# bytes of the secret part of the job: a float32 value for every variable, and the inputs
MAX_SECRET_BYTES = encoded_bytes(MAX_VARIABLE_VALUES, 4) + RECORD_ROOM
# bytes of a judge's request: the evidence forwarded, the secrets and the rest of the header
MAX_REQUEST_BYTES = MAX_EVIDENCE_BYTES + MAX_SECRET_BYTES + REQUEST_ROOM
# bytes of a judge's answer: every check with a message at its longest, as JSON
MAX_ANSWER_BYTES = MAX_CHECKS * (MAX_MESSAGE * JSON_CHARACTER_BYTES + 4096)
# bytes of one verdict as JSON: its checks as a judge answered them, and what the grading process
# printed and said of itself (a correct grading's verdict: a few KB)
MAX_VERDICT_BYTES = MAX_ANSWER_BYTES + REQUEST_ROOM


class LimitExceeded(Exception):
    """A quantity past its limit, found where it arises: the message names the quantity and the limit.
    The probe raises it inside a phase, so the phase ends with it as the layer's error (not the
    grader's), and the grading goes on at once rather than being refused by a later stage."""


def variables_problem(shapes) -> str | None:
    """What makes a layer's variables, given by their shapes, more than the grader handles, naming the
    limit; None when they are within every limit. The probe and the parent ask the same question."""
    shapes = list(shapes)
    if len(shapes) > MAX_VARIABLES:
        return f"the layer has {len(shapes):,} variables, more than the {MAX_VARIABLES:,} the grader handles"
    total = 0
    for shape in shapes:
        if len(shape) > MAX_RANK:
            return (f"a variable of the layer has {len(shape)} axes, more than the {MAX_RANK} of any array "
                    "the grader handles")
        elements = math.prod(shape)
        if elements > MAX_ARRAY_ELEMENTS:
            return (f"a variable of the layer of shape {tuple(shape)} holds {elements:,} values, more than the "
                    f"{MAX_ARRAY_ELEMENTS:,} of any one array the grader handles")
        total += elements
    if total > MAX_VARIABLE_VALUES:
        return (f"the layer's variables hold {total:,} values, more than the {MAX_VARIABLE_VALUES:,} in all "
                "that the grader sets")
    return None


# --------------------------------------------------------------------------- a submission, as read
# What the grader's own processes (a cold grade, a batch, the warm server) read of a submission
# before any limit of a grading applies (``grader.submission``): each is refused at once, by name.
MAX_SUBMISSION_BYTES = 16 * 1024 * 1024  # of its file: a notebook's outputs are the only large part of
# a real one; reading and decoding a notebook costs about five times its size
MAX_NOTEBOOK_VALUES = 1_000_000  # JSON values of a notebook, counted outside its strings before it is
# decoded: up to about 60 bytes each once decoded; a notebook with its outputs holds tens of thousands
MAX_SOURCE_BYTES = 256 * 1024  # of Python code (a file, a notebook's code cells together), which the
# grader parses: up to about 350 bytes of memory per byte, 90 MB at most; an answer is a few KiB, and
# the largest file the suite grades (a forger replaying exercise 5's recorded evidence) 240 KiB

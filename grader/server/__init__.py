"""The warm grading server: one per user and installation, so that every grade after the first
skips importing TensorFlow.

The first ``grade`` of a session starts it (``client``); it keeps the batch's warm worker
(``grader.workers.Workers``: TensorFlow and Keras imported once, one confined child
forked per grading) and the judge server, and grades each request exactly as a cold ``grade``
does (``daemon``). It returns the verdict as data; the command renders it. It listens on a Unix
socket in a private folder of the user's (``place``), answers only processes of its own user,
speaks length-prefixed JSON with bounded sizes (``wire``), exits after an idle time, and is
replaced when the installation it was started from changes.
"""

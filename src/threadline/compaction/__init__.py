"""Compaction: the lightest reset that works, done rarely, in big steps, priced first.

    clear_tools.py   stale tool results become placeholders (fetched back by item id)
    window.py        drop the oldest whole turns, down to a low-water mark, in one step
    summarize.py     a recall-first summary of what leaves the view, at a task boundary
    constraints.py   standing instructions, found before any compaction and pinned verbatim
    view.py          what the model sees of a branch after every compaction event on it
    plan.py          the planners' common result, its price, and the trigger policy

Every compaction is one ``compaction`` item appended to the log; nothing is deleted, and the
context view after it is a pure function of the log.
"""

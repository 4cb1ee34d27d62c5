"""The inspector: server-rendered pages at ``/ui`` that show what the model was shown.

The pages read the same store, through the same access control, as the API: a user token sees
only its user's conversations and memory. Nothing is built at install time and nothing is
fetched at run time: the templates (Jinja2) and the few static files live in this package.

    csrf.py        state-changing requests must come from the inspector's own pages
    templates/     base.html, the layout every page extends (blocks ``title`` and ``content``)
    static/        the stylesheet and script every page loads
"""

// The inspector's one script. Pages work without it; it only adds conveniences.
"use strict";

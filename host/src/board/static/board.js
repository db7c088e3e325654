// stet board's one script, served from the board's own origin (the policy allows no
// other, and no inline script). Pages work without it; it keeps them current.
"use strict";

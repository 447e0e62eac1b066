//! ofctrl (work in progress).

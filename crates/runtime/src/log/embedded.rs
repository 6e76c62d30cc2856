//! The embedded durable log. (Being written.)

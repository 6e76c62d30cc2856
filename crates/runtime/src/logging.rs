//! Log levels at run time: the `tracing` subscriber set-up and the handle behind
//! `GET/PUT /admin/loggers`. (Being written.)

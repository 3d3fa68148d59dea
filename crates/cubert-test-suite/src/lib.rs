//! Backend-generic behaviour tests (being written).

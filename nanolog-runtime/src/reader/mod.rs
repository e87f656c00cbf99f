//! Reading nanolog files.

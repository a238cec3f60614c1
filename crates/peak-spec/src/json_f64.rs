//! Serde for an `f64` that may be NaN or infinite: finite values are numbers, the others
//! the strings `"NaN"`, `"inf"` and `"-inf"`. Use with `#[serde(with = "json_f64")]`.

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        s.serialize_f64(*value)
    } else if value.is_nan() {
        s.serialize_str("NaN")
    } else if *value > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(f64),
        Text(String),
    }
    match Repr::deserialize(d)? {
        Repr::Number(v) => Ok(v),
        Repr::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(serde::de::Error::custom(format!("`{other}` is not a number"))),
        },
    }
}

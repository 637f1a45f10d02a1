//! The one mapping between a state or outcome enum and the seed's Portuguese word for it.
//!
//! The database and the JSON outputs keep the seed's words (`reservado`, `concluida`,
//! `ja-registrado`, …); the code compares enums. [`db_words!`] declares an enum together with its
//! words and derives, from that single list: `as_db()`, `TryFrom<&str>`, `FromStr`, `Display`,
//! serde (as the word) and sqlx (bound and decoded as `text`). No other code spells a state.

/// A word that is not one of an enum's words (a row written by something else, or a typo).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{word}`")]
pub struct UnknownWord {
    pub what: &'static str,
    pub word: String,
}

impl UnknownWord {
    pub fn new(what: &'static str, word: &str) -> Self {
        UnknownWord {
            what,
            word: shorten(word),
        }
    }
}

/// At most 64 characters of an unknown word, for an error message.
fn shorten(word: &str) -> String {
    word.chars().take(64).collect()
}

/// Declares an enum whose values are stored and printed as the seed's words.
///
/// ```ignore
/// db_words! {
///     /// The state of a ledger row.
///     pub enum State("ledger state") {
///         Reserved = "reservado",
///         Done = "concluido",
///     }
/// }
/// ```
///
/// Exported (at the crate's root, hidden, under the name `__db_words`) so the periphery's enums
/// speak the seed's words the same way; use it as `shared::words::db_words`.
#[doc(hidden)]
#[macro_export]
macro_rules! __db_words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            // Not every enum of a private module lists its values.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The seed's word for this value, as stored in the database.
            pub fn as_db(self) -> &'static str {
                match self {
                    $( $name::$variant => $word ),+
                }
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::shared::words::UnknownWord;
            fn try_from(word: &str) -> Result<Self, Self::Error> {
                match word {
                    $( $word => Ok($name::$variant), )+
                    other => Err($crate::shared::words::UnknownWord::new($what, other)),
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::shared::words::UnknownWord;
            fn from_str(word: &str) -> Result<Self, Self::Err> {
                Self::try_from(word)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_db())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_db())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Self::try_from(&*word).map_err(serde::de::Error::custom)
            }
        }

        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::Type<sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <&str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        impl sqlx::postgres::PgHasArrayType for $name {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }

        impl<'q> sqlx::Encode<'q, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, sqlx::Postgres>>::encode(self.as_db(), buf)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(
                value: sqlx::postgres::PgValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                let word = <&str as sqlx::Decode<'r, sqlx::Postgres>>::decode(value)?;
                Ok(Self::try_from(word)?)
            }
        }
    };
}

pub use crate::__db_words as db_words;

#[cfg(test)]
mod tests {
    use super::db_words;

    db_words! {
        enum Sample("sample") {
            One = "um",
            Two = "dois",
        }
    }

    #[test]
    fn every_word_maps_back_to_its_value() {
        for value in Sample::ALL {
            assert_eq!(Sample::try_from(value.as_db()), Ok(*value));
        }
    }

    #[test]
    fn an_unknown_word_is_an_error_that_names_what_it_should_have_been() {
        let err = Sample::try_from("tres").unwrap_err();

        assert_eq!(err.to_string(), "unknown sample `tres`");
    }

    #[test]
    fn json_carries_the_word() {
        assert_eq!(serde_json::to_string(&Sample::Two).unwrap(), "\"dois\"");
        assert_eq!(
            serde_json::from_str::<Sample>("\"um\"").unwrap(),
            Sample::One
        );
    }
}

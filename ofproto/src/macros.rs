//! `code_enum!`: numeric OpenFlow codes as enums with an `Unknown` arm, so a value this crate has
//! no name for still decodes, prints and re-encodes unchanged.

/// Define a `Copy` enum for a numeric wire code with conversions both ways and names.
macro_rules! code_enum {
    (
        $(#[$m:meta])*
        pub enum $name:ident : $ty:ty {
            $( $(#[$vm:meta])* $var:ident = $val:literal => $text:literal ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vm])* $var, )*
            /// A value this crate has no name for, kept as read.
            Unknown($ty),
        }

        impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                match v {
                    $( $val => $name::$var, )*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(v: $name) -> $ty {
                match v {
                    $( $name::$var => $val, )*
                    $name::Unknown(o) => o,
                }
            }
        }

        impl $name {
            /// The wire value.
            pub fn code(self) -> $ty {
                <$ty>::from(self)
            }

            /// The conventional name, or `None` for an unknown value.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $( $name::$var => Some($text), )*
                    $name::Unknown(_) => None,
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}", self.code()),
                }
            }
        }
    };
}

pub(crate) use code_enum;

//! Who owns a dedupe key: rendezvous (highest random weight) hashing over the member names.
//! Every pod computes the same owner from the same member list, with no coordination; a
//! member joining or leaving moves only the keys it wins or held (about 1/n of them).

use sha2::{Digest, Sha256};

/// The weight of `member` for `key`: the first 8 bytes of SHA-256(member, 0, key). A
/// cryptographic hash, so a sender cannot craft keys that pile onto one pod.
fn weight(member: &str, key: &[u8]) -> u64 {
    let mut h = Sha256::new();
    h.update(member.as_bytes());
    h.update([0u8]);
    h.update(key);
    let d = h.finalize();
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// The member with the highest weight for `key` (ties, astronomically rare, go to the
/// smaller name so every pod picks the same one); `None` for no members.
pub fn owner<'a, I>(members: I, key: &[u8]) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    members
        .into_iter()
        .map(|m| (weight(m, key), m))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("gw-{i}")).collect()
    }

    #[test]
    fn keys_spread_evenly_and_the_owner_is_stable() {
        let m = names(3);
        let mut counts = [0usize; 3];
        for k in 0..30_000u32 {
            let key = format!("evt_{k}");
            let o = owner(m.iter().map(String::as_str), key.as_bytes()).unwrap();
            // The same list in another order names the same owner.
            let rev = owner(m.iter().rev().map(String::as_str), key.as_bytes()).unwrap();
            assert_eq!(o, rev);
            counts[m.iter().position(|x| x == o).unwrap()] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "uneven spread: {counts:?}");
        }
    }

    #[test]
    fn adding_a_member_moves_only_the_keys_it_wins() {
        let three = names(3);
        let four = names(4);
        let mut moved = 0;
        for k in 0..20_000u32 {
            let key = format!("evt_{k}");
            let a = owner(three.iter().map(String::as_str), key.as_bytes()).unwrap();
            let b = owner(four.iter().map(String::as_str), key.as_bytes()).unwrap();
            if a != b {
                assert_eq!(b, "gw-3", "a key moved between two old members");
                moved += 1;
            }
        }
        assert!((4_000..6_000).contains(&moved), "moved {moved} of 20000");
    }

    #[test]
    fn no_members_no_owner() {
        assert_eq!(owner(std::iter::empty(), b"k"), None);
    }
}

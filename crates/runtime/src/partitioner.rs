//! Kafka's default partitioning of keyed records: `murmur2(key) & 0x7fffffff % partitions`,
//! so that a key lands in the same partition here as in Kafka.

/// Kafka's murmur2 hash (as in `org.apache.kafka.common.utils.Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's producer picks for a keyed record.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafka_murmur2_vectors() {
        // Vectors from Kafka's UtilsTest.testMurmur2.
        let cases: &[(&str, i32)] = &[
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
            ("abc", 479470107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()), *expected, "{input}");
        }
    }

    #[test]
    fn partition_is_in_range() {
        for i in 0..100 {
            let p = partition_for_key(format!("k{i}").as_bytes(), 7);
            assert!((0..7).contains(&p));
        }
    }
}

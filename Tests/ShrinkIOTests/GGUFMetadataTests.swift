import Foundation
import Testing
import ShrinkIO

/// GGUF metadata carried in a compressed container: every value type round-trips exactly through
/// the JSON form, and a damaged form is a typed error naming the container and key.
@Suite struct GGUFMetadataTests {
    @Test func everyValueTypeRoundTrips() throws {
        let entries: [(key: String, value: GGUFValue)] = [
            ("a", .uint8(255)), ("b", .int8(-128)), ("c", .uint16(65535)), ("d", .int16(-32768)), ("e", .uint32(4_294_967_295)),
            ("f", .int32(-2_147_483_648)), ("g", .float32(1e-5)), ("h", .float32(0.1)), ("i", .bool(true)), ("j", .string("tab\t\"quote\" é\n")),
            ("k", .array(elementType: 8, [.string("Ġ t"), .string("<|im_start|>")])), ("l", .uint64(.max)), ("m", .int64(.min)),
            ("n", .float64(-2.5e-300)), ("o", .array(elementType: 9, [.array(elementType: 4, [.uint32(1), .uint32(2)])])), ("p", .float32(.infinity)),
        ]
        let metadata = GGUFMetadata(path: "x.gguf", entries: entries)
        let decoded = try GGUFMetadata(json: metadata.json, path: "model.safetensors")
        #expect(decoded.entries.count == entries.count)
        for (actual, expected) in zip(decoded.entries, entries) {
            #expect(actual.key == expected.key && actual.value == expected.value, "\(expected.key)")
        }
        #expect(decoded.value("g") == .float32(1e-5) && decoded.path == "model.safetensors")
    }

    @Test func aDamagedFormIsATypedError() {
        for (json, message) in [("{", "not JSON"), ("{}", "not an array"), (#"[["a"]]"#, "entry 0 is not [key, value]"),
                                (#"[["a", [4, "-1"]]]"#, "entry 0 ('a') is not a typed GGUF value"), (#"[["a", [99, 1]]]"#, "entry 0 ('a')")] {
            #expect { _ = try GGUFMetadata(json: json, path: "m.safetensors") } throws: { error in
                "\(error)".contains(message) && "\(error)".contains("m.safetensors") && "\(error)".contains(GGUFMetadata.containerKey)
            }
        }
    }
}

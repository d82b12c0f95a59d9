import Testing
import ShrinkCore

@Suite struct JSONValueTests {
    @Test func parsesNestedValuesKeepingKeyOrderAndExactIntegers() throws {
        let value = try JSONValue.parse(#" {"b": [1, -2.5e3, true, null], "a": {"big": 18446744073709551615}, "s": "x\u00e9\ud83d\ude00\n"} "#)
        guard let pairs = value.objectValue else { Issue.record("not an object"); return }
        #expect(pairs.map(\.key) == ["b", "a", "s"])
        #expect(pairs[0].value == .array([.number("1"), .number("-2.5e3"), .bool(true), .null]))
        #expect(pairs[1].value.objectValue?.first?.value == .number("18446744073709551615"))
        #expect(pairs[2].value.stringValue == "xé😀\n")
    }

    @Test func serializationRoundTrips() throws {
        let text = #"{"k":["a\"b\\c\u0001",1.5,{}],"e":[]}"#
        #expect(try JSONValue.parse(text).serialized() == text)
    }

    @Test(arguments: [
        (#"{"a":1,}"#, 7), (#"[1 2]"#, 3), (#"{"a":1,"a":2}"#, 7), ("01", 1), ("\"\u{01}\"", 1),
        (#""\x""#, 2), (#""\ud800""#, 1), ("tru", 3), ("{} x", 3), ("", 0), ("-", 1), ("1.", 2),
    ])
    func rejectsInvalidJSONWithItsOffset(text: String, offset: Int) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
        do { _ = try JSONValue.parse(text) } catch { #expect(error.offset == offset, "\(text): \(error)") }
    }

    @Test func reportsDuplicateKeys() {
        do {
            _ = try JSONValue.parse(#"{"x": 1, "x": 2}"#)
            Issue.record("accepted a duplicate key")
        } catch {
            #expect(error.duplicateKey == "x")
        }
    }

    @Test func rejectsInvalidUTF8AndDeepNesting() {
        let bytes: [UInt8] = [0x22, 0xC3, 0x28, 0x22]
        #expect(throws: JSONParseError.self) { try bytes.withUnsafeBytes { try JSONValue.parse($0) } }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(String(repeating: "[", count: 300) + String(repeating: "]", count: 300)) }
    }
}

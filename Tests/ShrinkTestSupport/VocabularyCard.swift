import ShrinkModels

/// A vocabulary card: a structure a small model fills under guided generation (tests and GuidedBenchmark).
public struct VocabularyCard: GuidedGenerable, Equatable, Sendable {
    public enum PartOfSpeech: String, Decodable, Sendable { case noun, verb, adjective, adverb }
    public let word: String
    public let translation: String
    public let example: String
    public let partOfSpeech: PartOfSpeech
    public let difficulty: Int

    enum CodingKeys: String, CodingKey {
        case word, translation, example, difficulty
        case partOfSpeech = "part_of_speech"
    }

    public static let generationSchema = JSONSchema.object([
        ("word", .string(minLength: 1, maxLength: 40)),
        ("translation", .string(minLength: 1, maxLength: 60)),
        ("example", .string(minLength: 1, maxLength: nil)),
        ("part_of_speech", .enumeration(["noun", "verb", "adjective", "adverb"])),
        ("difficulty", .integer),
    ])
}

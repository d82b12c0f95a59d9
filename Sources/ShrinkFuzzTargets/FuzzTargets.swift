import Foundation
import ShrinkCompression
import ShrinkCore
import ShrinkEvaluation
import ShrinkIO
import ShrinkModels

/// What each fuzzer does with one input: the entry points that a user's file or text reaches,
/// called the way the command line calls them, every thrown error ignored. A finding is anything
/// else: a trap, an out-of-bounds access, a leak, a hang.
///
/// The libFuzzer executables (`Fuzz/`, `scripts/fuzz.sh`) run these under
/// `-sanitize=fuzzer,address`; the test suite replays the committed corpora (`Fuzz/Corpus/<fuzzer>`)
/// through the same functions, so every input a campaign kept, past crashers included, stays a
/// regression test.
public enum FuzzTargets {
    /// The largest tensor (in elements) that `readEveryTensor` decodes or converts: enough for every
    /// block type and container layout, small enough that a hostile shape costs no time.
    public static let largestDecodedTensor = 65_536

    /// Opens `path` as a model file (safetensors, Shrink's compressed container or GGUF, told apart
    /// by content), reads every tensor's storage, decodes the encoded tensors and converts the dense
    /// ones of at most `largestDecodedTensor` elements to floats.
    /// - Returns: how many tensors were read (0 when the file does not open).
    @discardableResult
    public static func readEveryTensor(path: String) -> Int {
        guard let store = try? TensorStores.open(path: path) else { return 0 }
        var read = 0
        for name in store.names {
            guard let tensor = store.tensor(named: name) else { continue }
            read += 1
            _ = store.storage(of: name)
            switch tensor {
            case .encoded(let encoded) where encoded.elementCount <= largestDecodedTensor: _ = encoded.decode()
            case .dense(let dense) where dense.elementCount <= largestDecodedTensor: _ = dense.floats()
            default: break
            }
        }
        return read
    }

    /// Loads `path` as a gate file (`recipes/gates/*.json`).
    /// - Returns: whether it loaded.
    @discardableResult
    public static func loadGate(path: String) -> Bool {
        (try? RecipeGate.load(path: path)) != nil
    }

    /// Recipes decoded from bytes, then resolved into a compression plan against one model's tensors
    /// and roles.
    public struct RecipeResolution: Sendable {
        private let descriptors: [TensorDescriptor]
        private let roles: [TensorRole]

        /// Reads the tensors and roles of the model in `folder` (`model.safetensors` and
        /// `config.json`).
        /// - Throws: what opening the model throws.
        public init(modelFolder folder: String) throws {
            let store = try TensorStores.open(path: folder + "/model.safetensors")
            let configuration = try ModelArchitectures.configuration(of: store, configPath: folder + "/config.json")
            descriptors = store.descriptors
            roles = ModelArchitectures.roles(of: store, configuration: configuration)
        }

        /// Parses `bytes` as a recipe and resolves it.
        /// - Returns: whether a plan resolved.
        @discardableResult
        public func resolve(_ bytes: UnsafeRawBufferPointer) -> Bool {
            guard let recipe = try? Recipe.parse(Data(bytes), file: "fuzz.json") else { return false }
            return (try? CompressionPlan.resolve(recipe, tensors: descriptors, roles: roles)) != nil
        }
    }

    /// Both tokenizers on any bytes, decoded as UTF-8 with replacement: WordPiece encodes; the
    /// byte-level BPE encodes (parsing special tokens when the first byte is odd) and decodes back.
    public struct Tokenization: Sendable {
        private let wordPiece: WordPieceTokenizer
        private let bpe: BPETokenizer

        /// Loads MiniLM's WordPiece vocabulary and SmolLM2's BPE from `modelsFolder` (the folder
        /// `scripts/fetch-models.py` fills).
        /// - Throws: what loading either tokenizer throws.
        public init(modelsFolder: String) throws {
            wordPiece = try WordPieceTokenizer(vocabularyFile: modelsFolder + "/all-MiniLM-L6-v2/vocab.txt")
            bpe = try BPETokenizer(gguf: GGUFFile(path: modelsFolder + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
        }

        /// Tokenizes `bytes` with both.
        /// - Returns: the number of tokens the two produced together.
        @discardableResult
        public func tokenize(_ bytes: UnsafeRawBufferPointer) -> Int {
            let text = String(decoding: bytes, as: UTF8.self)
            let pieces = wordPiece.encode(text)
            let ids = bpe.encode(text, parseSpecial: bytes.first.map { $0 & 1 == 1 } ?? false)
            _ = bpe.decode(ids)
            return pieces.count + ids.count
        }
    }
}

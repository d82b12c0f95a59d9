import FuzzSupport
import ShrinkFuzzTargets

/// Both tokenizers on any bytes (decoded as UTF-8 with replacement): MiniLM's WordPiece and
/// SmolLM2's byte-level BPE, with and without special tokens parsed; BPE decodes back.
let tokenization = try! FuzzTargets.Tokenization(modelsFolder: modelsFolder)
fuzz { tokenization.tokenize($0) }

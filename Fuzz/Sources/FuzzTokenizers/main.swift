import FuzzSupport
import ShrinkIO
import ShrinkModels

/// Both tokenizers on any bytes (decoded as UTF-8 with replacement): MiniLM's WordPiece and
/// SmolLM2's byte-level BPE, with and without special tokens parsed; BPE decodes back.
let wordPiece = try! WordPieceTokenizer(vocabularyFile: modelsFolder + "/all-MiniLM-L6-v2/vocab.txt")
let bpe = try! BPETokenizer(gguf: GGUFFile(path: modelsFolder + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
fuzz { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    _ = wordPiece.encode(text)
    let ids = bpe.encode(text, parseSpecial: bytes.first.map { $0 & 1 == 1 } ?? false)
    _ = bpe.decode(ids)
}

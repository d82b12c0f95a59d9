import Foundation

/// How one response is generated.
public struct GenerationOptions: Sendable, Equatable {
    /// Most tokens to generate (the end-of-generation token not counted).
    public var maximumTokens: Int
    /// 0 for greedy decoding, else the sampling temperature (`TokenSampler`).
    public var temperature: Float
    /// Nucleus sampling mass in (0, 1].
    public var topP: Float
    /// The sampler's seed: the same seed, prompt and transcript give the same tokens.
    public var seed: UInt64

    public init(maximumTokens: Int = 256, temperature: Float = 0, topP: Float = 1, seed: UInt64 = 0) {
        self.maximumTokens = maximumTokens
        self.temperature = temperature
        self.topP = topP
        self.seed = seed
    }
}

/// A token of a response and the text it completes (empty while a character spans tokens; the
/// last element may carry what is left of an incomplete character, replaced, under the last id).
public struct GeneratedToken: Sendable, Equatable {
    public let id: Int32
    public let text: String
}

/// What a response cost: prompt tokens evaluated, prompt tokens whose keys and values the cache
/// already held, and tokens generated.
public struct ResponseStatistics: Sendable, Equatable {
    public let evaluatedPromptTokens: Int
    public let reusedPromptTokens: Int
    public let generatedTokens: Int
}

/// Why a session did not respond.
public enum SessionError: Error, Equatable, CustomStringConvertible {
    /// Another response of the same session is still being generated.
    case busy
    /// The conversation's prompt does not leave a position to generate in.
    case contextFull(promptTokens: Int, capacity: Int)
    /// `maximumTokens` below 1 (or below what a schema's shortest value takes), or a temperature
    /// or `topP` `TokenSampler` refuses.
    case invalidOptions(reason: String)
    /// The generated JSON does not decode into the requested type (a type whose `Decodable`
    /// disagrees with its `generationSchema`).
    case undecodable(type: String, reason: String)

    public var description: String {
        switch self {
        case .busy: "the session is already responding (one response at a time per session)"
        case .contextFull(let tokens, let capacity): "the conversation's \(tokens) tokens fill the session's \(capacity) positions"
        case .invalidOptions(let reason): "invalid generation options: \(reason)"
        case .undecodable(let type, let reason): "the generated JSON does not decode into \(type): \(reason)"
        }
    }
}

/// A conversation with a decoder that has a ChatML chat template: each response streams its
/// tokens as they are generated, and the key/value cache is kept across turns, so a turn
/// evaluates only the tokens its prompt adds to what the cache holds (the conversation is
/// re-tokenized each turn and the cache kept up to the first token that differs).
///
/// One response at a time per session (`SessionError.busy` otherwise); any number of sessions
/// may share one `LlamaDecoder` and respond at once. Each streamed answer is generated on a
/// thread of its own, at most `TokenStream.lookahead + 1` tokens ahead of its consumer;
/// cancelling the consuming task, or leaving the stream early, stops it after the current token,
/// and the transcript then holds the answer so far.
public final class LanguageModelSession: @unchecked Sendable {
    public let model: LlamaDecoder
    /// The system message (nil: the template's default).
    public let instructions: String?
    private let tokenizer: BPETokenizer
    private let template: ChatTemplate
    private let state: DecoderState
    private let lock = NSLock()
    private var responding = false
    private var turns: [ChatTurn]
    /// The tokens whose keys and values the cache holds, position by position.
    private var cached: [Int32] = []
    private var statistics: ResponseStatistics?
    /// Compiled schemas of the types `respond(to:generating:)` was asked for.
    private var constraints: [ObjectIdentifier: TokenConstraint] = [:]

    /// A session over `model` with `capacity` positions of cache (at most the model's context),
    /// starting from `transcript` (user and assistant turns, in order).
    /// - Throws: `ModelError.notRunnable` when the model has no tokenizer or no ChatML template;
    ///   `ModelError.invalidArgument` for a capacity below 2.
    public init(model: LlamaDecoder, instructions: String? = nil, transcript: [ChatTurn] = [], capacity: Int = 4096) throws(ModelError) {
        guard let tokenizer = model.tokenizer else {
            throw .notRunnable(architecture: model.architecture, reason: "a session needs a tokenizer (a GGUF file's, or tokenizer.json)")
        }
        guard let source = tokenizer.chatTemplate, let template = ChatTemplate(template: source) else {
            throw .notRunnable(architecture: model.architecture, reason: "a session needs a ChatML chat template (tokenizer.chat_template)")
        }
        guard capacity >= 2 else { throw .invalidArgument(name: "capacity", reason: "\(capacity) positions; a session needs at least 2") }
        self.model = model
        self.instructions = instructions
        self.tokenizer = tokenizer
        self.template = template
        turns = transcript
        state = model.makeState(capacity: min(capacity, model.config.contextLength))
    }

    /// The conversation so far.
    public var transcript: [ChatTurn] { lock.withLock { turns } }

    /// The last finished response's costs (nil before the first).
    public var lastResponse: ResponseStatistics? { lock.withLock { statistics } }

    /// The answer to `prompt`, streamed token by token. The stream throws `SessionError` or
    /// `ModelError` when the response cannot start; it ends at the end-of-generation token, after
    /// `maximumTokens`, when the cache is full, or when its consumer is cancelled.
    ///
    /// With `constraint`, the answer is a JSON value of its schema: every token is drawn from
    /// those the schema allows next, and generation ends when the value is complete.
    public func streamResponse(to prompt: String, constraint: TokenConstraint? = nil,
                               options: GenerationOptions = GenerationOptions()) -> TokenStream {
        TokenStream { [self] channel in
            try respond(to: prompt, constraint: constraint, options: options, stop: channel.stop) { channel.send($0) }
        }
    }

    /// The whole answer to `prompt` (`streamResponse`, collected).
    public func respond(to prompt: String, constraint: TokenConstraint? = nil, options: GenerationOptions = GenerationOptions()) async throws -> String {
        var text = ""
        for try await token in streamResponse(to: prompt, constraint: constraint, options: options) { text += token.text }
        return text
    }

    /// An answer to `prompt` generated as a value of `type`'s schema (compiled once per session
    /// and type) and decoded into it.
    /// - Throws: `SessionError.undecodable` when `type`'s `Decodable` disagrees with its schema.
    public func respond<Value: GuidedGenerable>(to prompt: String, generating type: Value.Type,
                                                options: GenerationOptions = GenerationOptions()) async throws -> Value {
        let constraint = lock.withLock {
            if let known = constraints[ObjectIdentifier(type)] { return known }
            let compiled = TokenConstraint(schema: Value.generationSchema, tokenizer: tokenizer)
            constraints[ObjectIdentifier(type)] = compiled
            return compiled
        }
        let text = try await respond(to: prompt, constraint: constraint, options: options)
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw SessionError.undecodable(type: String(describing: type), reason: "\(error)")
        }
    }

    /// The answer to `prompt` generated on the calling thread, each token handed to `onToken` as
    /// it comes (generation stops after a token for which it returns false); what `streamResponse`
    /// runs, for callers outside Swift concurrency.
    public func respond(to prompt: String, constraint: TokenConstraint? = nil, options: GenerationOptions,
                        onToken: (GeneratedToken) -> Bool) throws {
        let stop = StopFlag()
        try respond(to: prompt, constraint: constraint, options: options, stop: stop) { token in
            if !onToken(token) { stop.set() }
        }
    }

    /// Generates the answer to `prompt` on the calling thread, handing each token to `emit`.
    func respond(to prompt: String, constraint: TokenConstraint? = nil, options: GenerationOptions, stop: StopFlag,
                 emit: (GeneratedToken) -> Void) throws {
        try lock.withLock { () throws in
            guard !responding else { throw SessionError.busy }
            responding = true
        }
        defer { lock.withLock { responding = false } }
        let fewest = max(1, constraint?.minimumTokens ?? 1)
        guard options.maximumTokens >= fewest else {
            throw SessionError.invalidOptions(reason: "maximumTokens is \(options.maximumTokens), at least \(fewest) needed")
        }
        var sampler: TokenSampler
        do {
            sampler = try TokenSampler(temperature: options.temperature, topP: options.topP, seed: options.seed)
        } catch {
            throw SessionError.invalidOptions(reason: error.description)
        }
        let conversation = turns + [ChatTurn(role: .user, content: prompt)]
        let tokens = tokenizer.encode(template.prompt(turns: conversation, system: instructions), parseSpecial: true)
        guard tokens.count < state.capacity else { throw SessionError.contextFull(promptTokens: tokens.count, capacity: state.capacity) }
        // Keep the cache up to the first token that differs, and evaluate at least the last one for its logits.
        let reused = min(zip(cached, tokens).prefix { $0 == $1 }.count, tokens.count - 1)
        state.position = reused
        cached = Array(tokens[..<reused])
        var next: Int32 = 0
        var structure = constraint?.start ?? 0, generated = 0
        var masked = [Float](repeating: 0, count: constraint == nil ? 0 : model.config.vocabularySize)
        /// The next token from `logits`, among those the constraint allows.
        func pick(_ logits: UnsafeBufferPointer<Float>) -> Int32 {
            guard let constraint else { return sampler.next(logits) }
            return masked.withUnsafeMutableBufferPointer { buffer in
                for index in buffer.indices { buffer[index] = logits[index] }
                constraint.mask(buffer, state: structure, remaining: options.maximumTokens - generated, endOfGeneration: tokenizer.endOfGeneration)
                return sampler.next(UnsafeBufferPointer(buffer))
            }
        }
        let fresh = Array(tokens[reused...])
        try model.evaluate(fresh, state: state, logitRows: (fresh.count - 1)..<fresh.count) { _, logits in next = pick(logits) }
        cached = tokens
        var stream = UTF8Stream()
        var answer = "", last: Int32?
        while !tokenizer.endOfGeneration.contains(next), !stop.isSet {
            let token = next
            let text = stream.append(tokenizer.bytes(of: token))
            answer += text
            emit(GeneratedToken(id: token, text: text))
            last = token
            generated += 1
            if let constraint {
                structure = constraint.advance(structure, by: token)
                if constraint.isFinished(structure) { break }
            }
            guard generated < options.maximumTokens, state.position < state.capacity else { break }
            try model.evaluate([token], state: state, logitRows: 0..<1) { _, logits in next = pick(logits) }
            cached.append(token)
        }
        let rest = stream.finish()
        if let last, !rest.isEmpty {
            answer += rest
            emit(GeneratedToken(id: last, text: rest))
        }
        lock.withLock {
            turns = conversation + [ChatTurn(role: .assistant, content: answer)]
            statistics = ResponseStatistics(evaluatedPromptTokens: fresh.count, reusedPromptTokens: reused, generatedTokens: generated)
        }
    }
}

/// A flag one thread sets and another polls.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

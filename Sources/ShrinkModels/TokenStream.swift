import Foundation

/// The tokens of one response, handed from the thread that generates them to one async consumer
/// through a buffer of at most `lookahead` tokens: the generator waits while the buffer is full,
/// so it never runs more than `lookahead + 1` tokens ahead of its consumer, and it stops after the
/// current token once the consumer is gone (the stream and its iterator released, as when a
/// `for try await` loop is left) or its task is cancelled. Single consumer: iterators made from
/// one stream share its tokens.
public struct TokenStream: AsyncSequence, Sendable {
    public typealias Element = GeneratedToken
    /// Tokens the generator may have ready before it waits for the consumer.
    public static let lookahead = 8

    let handle: Handle

    /// A stream fed by `produce`, run on a thread of its own (8 MB of stack): it hands each token
    /// to the channel's `send`, and its return or error ends the stream.
    init(produce: @escaping @Sendable (TokenChannel) throws -> Void) {
        let channel = TokenChannel()
        handle = Handle(channel: channel)
        // Generation blocks for the whole answer: a thread of its own keeps it off Swift
        // concurrency's cooperative pool, whose few threads the consumer needs to run.
        let thread = Thread {
            do {
                try produce(channel)
                channel.finish(nil)
            } catch {
                channel.finish(error)
            }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }

    public func makeAsyncIterator() -> Iterator { Iterator(handle: handle) }

    public struct Iterator: AsyncIteratorProtocol {
        let handle: Handle

        public mutating func next() async throws -> GeneratedToken? { try await handle.channel.next() }
    }

    /// Ends generation when the last stream or iterator referring to it is released.
    final class Handle: Sendable {
        let channel: TokenChannel

        init(channel: TokenChannel) { self.channel = channel }

        deinit { channel.cancel() }
    }
}

/// The buffer between a generating thread and the consumer of a `TokenStream`.
final class TokenChannel: @unchecked Sendable {
    private let condition = NSCondition()
    private var buffer: [GeneratedToken] = []
    private var head = 0
    /// Set by `finish`: nil for a normal end, else the error the stream throws (once).
    private var ending: (any Error)??
    private var waiting: CheckedContinuation<GeneratedToken?, any Error>?
    /// Set when the consumer is gone or cancelled; the generator checks it after every token.
    let stop = StopFlag()

    /// Hands `token` to the consumer, waiting while `TokenStream.lookahead` tokens are unread;
    /// dropped once the consumer is gone.
    func send(_ token: GeneratedToken) {
        condition.lock()
        while buffer.count - head >= TokenStream.lookahead, !stop.isSet { condition.wait() }
        if stop.isSet {
            condition.unlock()
            return
        }
        if let consumer = waiting {
            waiting = nil
            condition.unlock()
            consumer.resume(returning: token)
            return
        }
        buffer.append(token)
        condition.unlock()
    }

    /// Ends the stream after the buffered tokens: normally (`error` nil) or throwing `error`.
    func finish(_ error: (any Error)?) {
        condition.lock()
        guard let consumer = waiting else {
            ending = .some(error)
            condition.unlock()
            return
        }
        waiting = nil
        ending = .some(nil)
        condition.unlock()
        if let error { consumer.resume(throwing: error) } else { consumer.resume(returning: nil) }
    }

    /// The next token, nil at the end; throws the generator's error once.
    func next() async throws -> GeneratedToken? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (consumer: CheckedContinuation<GeneratedToken?, any Error>) in
                condition.lock()
                if head < buffer.count {
                    let token = buffer[head]
                    head += 1
                    if head == buffer.count { (buffer, head) = ([], 0) }
                    condition.broadcast()
                    condition.unlock()
                    consumer.resume(returning: token)
                } else if let ending {
                    self.ending = .some(nil)
                    condition.unlock()
                    if let error = ending { consumer.resume(throwing: error) } else { consumer.resume(returning: nil) }
                } else if stop.isSet {
                    condition.unlock()
                    consumer.resume(returning: nil)
                } else {
                    waiting = consumer
                    condition.unlock()
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Stops the generator and ends a waiting `next` with nil.
    func cancel() {
        stop.set()
        condition.lock()
        let consumer = waiting
        waiting = nil
        condition.broadcast()
        condition.unlock()
        consumer?.resume(returning: nil)
    }
}

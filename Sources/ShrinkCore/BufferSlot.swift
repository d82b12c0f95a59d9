import CShrinkCoreSupport

/// Which of a layer's kept buffers the calling thread uses first (a thread-local index, 0 unless
/// set): the groups of one forward pass that run at once (`BertEncoder`'s sentence groups) each
/// set their own, so each keeps to buffers it grew itself, whichever thread runs it and in
/// whichever order the groups reach a layer.
public enum BufferSlot {
    /// The calling thread's slot.
    public static var current: Int { Int(shrink_buffer_slot()) }

    /// Runs `body` with the calling thread's slot set to `slot`, then restores it.
    public static func with<Result>(_ slot: Int, _ body: () -> Result) -> Result {
        let previous = shrink_buffer_slot()
        shrink_set_buffer_slot(Int32(slot))
        defer { shrink_set_buffer_slot(previous) }
        return body()
    }
}

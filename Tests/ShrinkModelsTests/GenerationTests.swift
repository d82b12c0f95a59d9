import Foundation
import Testing
@testable import ShrinkModels

/// Sampling, chat prompts and streamed UTF-8: the pieces `shrink generate` is made of.
@Suite struct GenerationTests {
    @Test func greedyTakesTheLargestAndSamplingRespectsTopP() throws {
        let logits: [Float] = [0, 3, 1, 2.9, -5]
        try logits.withUnsafeBufferPointer { values in
            var greedy = try TokenSampler(temperature: 0, seed: 1)
            #expect(greedy.next(values) == 1)
            // At temperature 1, tokens 1 and 3 hold 0.479 and 0.433 of the mass: top-p 0.45 keeps only token 1.
            var narrow = try TokenSampler(temperature: 1, topP: 0.45, seed: 2)
            #expect((0..<200).allSatisfy { _ in narrow.next(values) == 1 })
            var wide = try TokenSampler(temperature: 1, topP: 1, seed: 3)
            let draws = (0..<4000).map { _ in wide.next(values) }
            let share = Double(draws.filter { $0 == 3 }.count) / Double(draws.count)
            #expect(abs(share - 0.4328) < 0.03, "token 3 drawn \(share) of the time")
            var again = try TokenSampler(temperature: 1, topP: 1, seed: 3)
            #expect((0..<4000).map { _ in again.next(values) } == draws)
        }
    }

    @Test func samplerOptionsOutsideTheirDomainThrow() throws {
        for (temperature, topP, name) in [(Float(-0.5), Float(1), "temperature"), (.nan, 1, "temperature"), (.infinity, 1, "temperature"),
                                          (1, 0, "topP"), (1, 1.5, "topP"), (1, .nan, "topP")] {
            #expect { _ = try TokenSampler(temperature: temperature, topP: topP, seed: 0) } throws: { error in
                guard case .invalidArgument(let argument, _) = error as? ModelError else { return false }
                return argument == name
            }
        }
        var sampler = try TokenSampler(temperature: 1, seed: 0)
        #expect([Float]().withUnsafeBufferPointer { sampler.next($0) } == 0)
    }

    @Test func chatMLTemplatesKeepTheirDefaultSystemMessage() throws {
        let smol = "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are SmolLM.<|im_end|>\\n' }}{% endif %}"
            + "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
        let template = try #require(ChatTemplate(template: smol))
        #expect(template.defaultSystem == "You are SmolLM.")
        #expect(template.prompt(user: "Hi") == "<|im_start|>system\nYou are SmolLM.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        #expect(template.prompt(user: "Hi", system: "Be brief.").hasPrefix("<|im_start|>system\nBe brief.<|im_end|>"))
        let plain = try #require(ChatTemplate(template: "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'}}"))
        #expect(plain.defaultSystem == nil && plain.prompt(user: "x") == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n")
        #expect(ChatTemplate(template: "[INST] {{ message['content'] }} [/INST]") == nil)
    }

    @Test func utf8StreamWaitsForWholeCharacters() {
        var stream = UTF8Stream()
        let bytes = Array("a🙂é".utf8)
        #expect(stream.append(Array(bytes[0..<2])) == "a")
        #expect(stream.append(Array(bytes[2..<4])) == "")
        #expect(stream.append(Array(bytes[4..<6])) == "🙂")
        #expect(stream.append(Array(bytes[6...])) == "é")
        #expect(stream.append([0xE2]) == "" && stream.finish() == "\u{FFFD}")
    }
}
